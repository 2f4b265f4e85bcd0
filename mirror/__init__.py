"""kmirror: the product. Endpoints, routing, the Spark driver, the CLI and benchmarks."""
