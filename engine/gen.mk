# Sources generated at build time for engine/ (added to GEN_SRC by the top Makefile).
