"""Text helpers used by templates and URL building."""

import re
import unicodedata


def slugify(value):
    """Turn 'Hello, World!' into a URL-safe slug."""
    value = unicodedata.normalize("NFKD", str(value)).encode("ascii", "ignore").decode("ascii")
    value = re.sub(r"[^\w\s-]", "", value).strip()
    return re.sub(r"[-\s]+", "-", value)


def truncate_words(text, count, ending="..."):
    """Keep the first `count` words of `text`, adding `ending` if anything was cut."""
    words = text.split()
    if len(words) <= count:
        return " ".join(words)
    return " ".join(words[: count + 1]) + ending


def capfirst(value):
    """Capitalize the first character only."""
    return value[:1].upper() + value[1:] if value else value
