"""Files we read and write safely: capped reads of regular files, atomic writes that keep mode and links."""
