"""The asyncio Kafka wire server and its partition logs."""
