"""From job records to results: Open Problems' files, ``results.json``, scaling and statistics."""
