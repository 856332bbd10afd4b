"""The P4 programs: locating p4c and bmv2, compiling into the committed artifacts, the drop reasons."""
