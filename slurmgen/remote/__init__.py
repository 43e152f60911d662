"""Talking to a cluster from a laptop: the transport (this machine or OpenSSH), code snapshots."""
