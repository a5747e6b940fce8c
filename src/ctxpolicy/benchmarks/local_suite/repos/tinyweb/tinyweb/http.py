"""Query strings and status codes."""

from urllib.parse import quote, unquote_plus

REASON_PHRASES = {
    200: "OK",
    201: "Created",
    301: "Moved Permanently",
    302: "Found",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    500: "Internal Server Error",
}


def reason_phrase(status):
    return REASON_PHRASES.get(status, "Unknown Status Code")


class QueryDict:
    """A multi-valued mapping parsed from a query string such as 'a=1&b=2&a=3'."""

    def __init__(self, query_string=""):
        self._data = {}
        for part in query_string.split("&"):
            if not part:
                continue
            key, _, value = part.partition("=")
            self._data.setdefault(unquote_plus(key), []).append(unquote_plus(value))

    def __getitem__(self, key):
        return self._data[key][-1]

    def __contains__(self, key):
        return key in self._data

    def get(self, key, default=None):
        return self[key] if key in self else default

    def getlist(self, key):
        return list(self._data.get(key, []))

    def keys(self):
        return list(self._data)
