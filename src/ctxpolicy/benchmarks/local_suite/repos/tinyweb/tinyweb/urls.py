"""URL routing: patterns like 'articles/<int:year>/<slug:title>/'."""

import re

CONVERTERS = {
    "int": (r"[0-9]+", int),
    "str": (r"[^/]+", str),
    "slug": (r"[-a-zA-Z0-9_]+", str),
}


class NoReverseMatch(Exception):
    pass


class Resolver404(Exception):
    pass


class Route:
    def __init__(self, pattern, view, name=None):
        self.pattern = pattern
        self.view = view
        self.name = name
        self.params = []
        regex = "^"
        for literal, conv, param in re.findall(r"([^<]*)(?:<(\w+):(\w+)>)?", pattern):
            regex += re.escape(literal)
            if param:
                self.params.append((param, conv))
                regex += f"(?P<{param}>{CONVERTERS[conv][0]})"
        self.regex = re.compile(regex + "$")

    def match(self, path):
        m = self.regex.match(path)
        if not m:
            return None
        return {name: CONVERTERS[conv][1](m.group(name)) for name, conv in self.params}


class Router:
    def __init__(self, routes=()):
        self.routes = list(routes)

    def add(self, pattern, view, name=None):
        self.routes.append(Route(pattern, view, name))

    def resolve(self, path):
        for route in self.routes:
            kwargs = route.match(path)
            if kwargs is not None:
                return route.view, kwargs
        raise Resolver404(path)

    def reverse(self, name, **kwargs):
        for route in self.routes:
            if route.name != name:
                continue
            path = route.pattern
            for param, conv in route.params:
                if param not in kwargs:
                    raise NoReverseMatch(f"missing argument {param!r} for {name!r}")
                path = path.replace(f"<{conv}:{param}>", str(kwargs[param]))
            return "/" + path
        raise NoReverseMatch(name)
