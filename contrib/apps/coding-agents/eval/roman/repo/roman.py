"""Roman numerals."""

VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def to_int(numeral):
    """The value of a Roman numeral such as "MCMXCIV" (1994)."""
    return sum(VALUES[c] for c in numeral)
