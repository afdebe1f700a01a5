"""Pure classic group coordinator: states, handlers that return records, replay."""
