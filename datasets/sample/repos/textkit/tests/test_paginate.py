import pytest

from textkit.errors import PageNotFound
from textkit.paginate import Paginator


def test_even_split_pages():
    paginator = Paginator(range(10), per_page=5)
    assert paginator.num_pages == 2
    assert paginator.page(2).items == [5, 6, 7, 8, 9]


def test_first_page_navigation_flags():
    page = Paginator(range(10), per_page=5).page(1)
    assert page.has_next and not page.has_previous


def test_empty_list_has_one_empty_page():
    paginator = Paginator([], per_page=3)
    assert paginator.num_pages == 1
    assert paginator.page(1).items == []


def test_page_zero_is_not_found():
    with pytest.raises(PageNotFound):
        Paginator(range(4), per_page=2).page(0)


def test_per_page_must_be_positive():
    with pytest.raises(ValueError):
        Paginator([1], per_page=0)
