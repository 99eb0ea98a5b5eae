"""A small calculator.

add() is broken on purpose: the sandboxed-coding-agent app's planner is
asked to fix it without touching test_calculator.py.
"""


def add(a, b):
    return a - b


def subtract(a, b):
    return a - b


def multiply(a, b):
    return a * b


def divide(a, b):
    if b == 0:
        raise ZeroDivisionError("division by zero")
    return a / b
