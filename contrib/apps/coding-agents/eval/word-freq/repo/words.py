"""Word frequencies."""
import collections


def top_words(text, n):
    """The n most frequent words of text as (word, count) pairs, most
    frequent first, ties in alphabetical order.  Words are runs of letters
    and apostrophes, compared without regard to case."""
    counts = collections.Counter(text.split())
    return counts.most_common(n)
