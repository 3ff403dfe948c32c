#!/usr/bin/env bash
# README command 1: set up .venv and run the main job on the embedded default (SQLite + Chroma):
# the self-correcting loop on a real AWS CLI against a local moto S3 server (`librarian demo`).
# The first run indexes the AWS CLI's s3 and s3api help into LIBRARIAN_HOME (a few minutes).
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh" demo
source "$(dirname "${BASH_SOURCE[0]}")/_debian.sh"
ensure_debian_package bwrap bubblewrap "tasks run in namespaces"
exec .venv/bin/librarian demo "$@"
