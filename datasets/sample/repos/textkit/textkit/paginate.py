"""Split a sequence of items into numbered pages (1-based), e.g. for listing search results."""

from dataclasses import dataclass

from textkit.errors import PageNotFound


@dataclass(frozen=True)
class Page:
    number: int
    items: list
    num_pages: int

    @property
    def has_next(self):
        return self.number < self.num_pages

    @property
    def has_previous(self):
        return self.number > 1


class Paginator:
    """Pages of ``per_page`` items over ``items``. An empty list still has one (empty) page."""

    def __init__(self, items, per_page):
        if per_page < 1:
            raise ValueError(f"per_page must be at least 1, got {per_page}")
        self.items = list(items)
        self.per_page = per_page

    @property
    def count(self):
        return len(self.items)

    @property
    def num_pages(self):
        return max(1, self.count // self.per_page)

    def page(self, number):
        """Page ``number`` (1-based). Raises PageNotFound outside ``1..num_pages``."""
        if not 1 <= number <= self.num_pages:
            raise PageNotFound(number, self.num_pages)
        start = (number - 1) * self.per_page
        return Page(number, self.items[start:start + self.per_page], self.num_pages)

    def __iter__(self):
        for number in range(1, self.num_pages + 1):
            yield self.page(number)
