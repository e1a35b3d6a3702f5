package pyflinktensair.serving;

import java.util.SplittableRandom;

import org.apache.flink.connector.datagen.source.GeneratorFunction;

/**
 * Event {@code i} as the JSON text {@code serve} reads by default,
 * {@code {"id":"<i>:<created epoch ms>","x":[f_1,...,f_n]}}, with features drawn from a standard
 * normal law seeded by {@code (seed, i)} and written with four decimals, or (with
 * {@code vocabulary > 0}) ids drawn uniformly below it, for models that embed them. Made on the JVM (inside
 * Flink's {@code DataGeneratorSource}, which paces it), so that a load test's source costs no
 * Python and its creation time is the moment the event enters the job.
 */
public final class SyntheticEvents implements GeneratorFunction<Long, String> {

    private static final long serialVersionUID = 1L;
    private final int features;
    private final long seed;
    private final int vocabulary;

    public SyntheticEvents(int features, long seed) {
        this(features, seed, 0);
    }

    public SyntheticEvents(int features, long seed, int vocabulary) {
        if (features < 1 || vocabulary < 0) {
            throw new IllegalArgumentException("need features >= 1 and vocabulary >= 0, not " + features + ", "
                    + vocabulary);
        }
        this.features = features;
        this.seed = seed;
        this.vocabulary = vocabulary;
    }

    @Override
    public String map(Long index) {
        SplittableRandom random = new SplittableRandom(seed * 0x9E3779B97F4A7C15L + index);
        StringBuilder text = new StringBuilder(16 + 9 * features);
        text.append("{\"id\":\"").append(index).append(':').append(System.currentTimeMillis()).append("\",\"x\":[");
        for (int j = 0; j < features; j++) {
            if (j > 0) {
                text.append(',');
            }
            if (vocabulary > 0) {
                text.append(random.nextInt(vocabulary));
            } else {
                fourDecimals(gaussian(random), text);
            }
        }
        return text.append("]}").toString();
    }

    /** {@code %.4f} without {@code String.format}, which cost a microsecond a feature. */
    static void fourDecimals(double value, StringBuilder out) {
        long scaled = Math.round(Math.abs(value) * 10000.0);
        if (value < 0 && scaled != 0) {
            out.append('-');
        }
        out.append(scaled / 10000).append('.');
        long fraction = scaled % 10000;
        for (long digit = 1000; digit > 0; digit /= 10) {
            out.append((char) ('0' + (fraction / digit) % 10));
        }
    }

    private static double gaussian(SplittableRandom random) {
        // Box-Muller: SplittableRandom has no nextGaussian before Java 17's RandomGenerator
        double u = 1.0 - random.nextDouble();
        return Math.sqrt(-2.0 * Math.log(u)) * Math.cos(2.0 * Math.PI * random.nextDouble());
    }
}
