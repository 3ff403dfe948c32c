#!/usr/bin/env bash
# README command 1: set up .venv and run the main job on the embedded default (SQLite + Chroma):
# ingest the AWS CLI's bundled documentation and search it.
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh" demo
exec .venv/bin/librarian tour "$@"
