"""Source adapters: each turns one dataset family's rows into TaskRecords (or column-named rejections)."""
