"""HTTP: the admin API and metrics on the console port."""
