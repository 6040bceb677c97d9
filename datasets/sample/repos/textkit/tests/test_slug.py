from textkit.slug import slugify, unique_slug


def test_slugify_basic_title():
    assert slugify("Hello, World!") == "hello-world"


def test_slugify_strips_accents():
    assert slugify("Crème Brûlée Recipes") == "creme-brulee-recipes"


def test_slugify_custom_separator():
    assert slugify("a b c", sep="_") == "a_b_c"


def test_slugify_max_length_never_ends_on_separator():
    assert slugify("one two three", max_length=8) == "one-two"


def test_unique_slug_adds_counter():
    assert unique_slug("Post", {"post", "post-2"}) == "post-3"
