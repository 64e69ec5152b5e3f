"""An answer's own domain, below answering: the Answer and Question records, question files,
answer forms (lists, ranges, "asks to compute"), normalisation into WattBot's spelling, how
two values compare, and voting over runs."""
