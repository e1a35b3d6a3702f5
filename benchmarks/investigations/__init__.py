"""One-off investigations: each answered one past question, written down where README.md says."""
