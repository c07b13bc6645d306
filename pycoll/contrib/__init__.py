"""Bridges to frameworks, each imported only when asked for:

    pycoll.contrib.torch    DDP communication hooks and process-group set-up
"""
