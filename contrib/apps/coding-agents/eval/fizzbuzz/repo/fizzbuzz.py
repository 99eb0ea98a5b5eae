"""FizzBuzz as a list of strings."""


def fizzbuzz(n):
    """The FizzBuzz sequence from 1 to n, inclusive."""
    out = []
    for i in range(1, n):
        if i % 3 == 0:
            out.append("Fizz")
        elif i % 5 == 0:
            out.append("Buzz")
        elif i % 15 == 0:
            out.append("FizzBuzz")
        else:
            out.append(str(i))
    return out
