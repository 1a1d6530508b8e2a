# Sources generated at build time for text/ (added to GEN_SRC by the top Makefile).
#
# The byte-level BPE pre-tokenizers need the Unicode classes letter (\p{L}, and its sub-categories
# Lu, Ll, Lt, Lm, Lo), mark (\p{M}), number (\p{N}), punctuation (\p{P}) and white space (\s).
# The table is generated from Debian's unicode-data package rather than
# checked in, so updating Unicode is a package upgrade (tools/setup.sh deps installs it).
# The object lands at $(BUILD)/$(BUILD)/gen/unicode_table.o: the top Makefile maps every
# source path, generated ones included, under $(BUILD).

UNICODE_DIR      ?= /usr/share/unicode
UNICODE_INPUTS   := $(UNICODE_DIR)/PropList.txt $(UNICODE_DIR)/UnicodeData.txt
UNICODE_TABLE    := $(BUILD)/gen/unicode_table.c

GEN_SRC += $(UNICODE_TABLE)

# This file is included before the Makefile's first target; without this its first rule would
# become the default goal of a plain `make`.
.DEFAULT_GOAL := all

$(UNICODE_TABLE): text/gen_unicode.awk $(UNICODE_INPUTS)
	@mkdir -p $(dir $@)
	awk -f text/gen_unicode.awk $(UNICODE_INPUTS) > $@.tmp
	mv $@.tmp $@

$(UNICODE_INPUTS):
	@echo "missing $@: install Debian's unicode-data package (make deps)" >&2
	@false
