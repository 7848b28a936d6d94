"""The audit trail: a hash-chained, append-only event log, signed and verifiable offline."""
