from tinyweb.forms import CharField, Form, IntegerField


class ContactForm(Form):
    name = CharField(max_length=10)
    age = IntegerField(min_value=0, required=False)


def test_valid_form():
    form = ContactForm({"name": " Ada ", "age": "36"})
    assert form.is_valid()
    assert form.cleaned_data == {"name": "Ada", "age": 36}


def test_required_field():
    form = ContactForm({"age": "3"})
    assert not form.is_valid()
    assert form.errors == {"name": "This field is required."}


def test_max_length():
    assert not ContactForm({"name": "x" * 11}).is_valid()


def test_min_value():
    form = ContactForm({"name": "Ada", "age": "-1"})
    assert not form.is_valid()
    assert form.errors["age"] == "Ensure this value is greater than or equal to 0."


def test_not_a_number():
    form = ContactForm({"name": "Ada", "age": "ten"})
    assert not form.is_valid()
    assert form.errors["age"] == "Enter a whole number."
