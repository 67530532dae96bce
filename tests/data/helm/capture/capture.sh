#!/bin/sh
tee "$CAPTURE_FILE"
