"""Form fields that clean and validate raw string input."""


class ValidationError(Exception):
    pass


class Field:
    def __init__(self, required=True):
        self.required = required

    def clean(self, value):
        if value in (None, ""):
            if self.required:
                raise ValidationError("This field is required.")
            return None
        return self.to_python(value)

    def to_python(self, value):
        return value


class CharField(Field):
    def __init__(self, max_length=None, **kwargs):
        super().__init__(**kwargs)
        self.max_length = max_length

    def to_python(self, value):
        value = str(value).strip()
        if self.max_length is not None and len(value) > self.max_length:
            raise ValidationError(f"Ensure this value has at most {self.max_length} characters.")
        return value


class IntegerField(Field):
    def __init__(self, min_value=None, max_value=None, **kwargs):
        super().__init__(**kwargs)
        self.min_value = min_value
        self.max_value = max_value

    def to_python(self, value):
        try:
            number = int(str(value).strip())
        except ValueError:
            raise ValidationError("Enter a whole number.") from None
        if self.min_value is not None and number < self.min_value:
            raise ValidationError(f"Ensure this value is greater than or equal to {self.min_value}.")
        return number


class Form:
    """Declare fields as class attributes; call is_valid() and read cleaned_data or errors."""

    def __init__(self, data):
        self.data = data
        self.cleaned_data = {}
        self.errors = {}

    @classmethod
    def fields(cls):
        return {name: f for name, f in vars(cls).items() if isinstance(f, Field)}

    def is_valid(self):
        self.cleaned_data, self.errors = {}, {}
        for name, field in self.fields().items():
            try:
                self.cleaned_data[name] = field.clean(self.data.get(name))
            except ValidationError as exc:
                self.errors[name] = str(exc)
        return not self.errors
