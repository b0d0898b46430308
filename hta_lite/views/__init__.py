"""What users look at besides the notebook: the ``hta-lite`` command line and the HTML report."""
