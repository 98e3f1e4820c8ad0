"""Test and demo support: the local S3 server (moto on 127.0.0.1) with request counting and fault injection."""
