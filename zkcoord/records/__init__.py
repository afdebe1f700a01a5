"""__consumer_offsets record codecs and record-batch helpers."""
