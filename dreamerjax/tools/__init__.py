"""Commands on top of everything: the command line, bench, compare, parity, summary, merge."""
