from setuptools import find_packages, setup

setup(
    name="pyflink_tensair",
    version="0.1.0",
    description="Keras model replicas trained inside PyFlink jobs, exchanging gradients (DASGD) "
                "through a feedback loop in the dataflow.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.9,<3.13",
    packages=find_packages(include=["pyflink_tensair", "pyflink_tensair.*"]),
    package_data={"pyflink_tensair.feedback": ["java/pyflinktensair/feedback/*.java"]},
    install_requires=[
        "apache-flink==2.3.0",
        "tensorflow-cpu>=2.16,<2.21",
        "keras>=3.3,<4",
        "numpy>=1.24,<2.2",
        "scipy>=1.10",  # the drift detectors' t and F quantiles
    ],
    extras_require={"test": ["pytest>=8"], "jobs": ["scikit-learn>=1.3", "matplotlib>=3.7"]},
)
