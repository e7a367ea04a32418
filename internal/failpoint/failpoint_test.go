package failpoint

import "testing"

func TestParse(t *testing.T) {
	t.Parallel()
	m := parse(" dag-before-promote, ,dag-after-promote")
	if !m["dag-before-promote"] || !m["dag-after-promote"] || len(m) != 2 {
		t.Fatalf("parse: %v", m)
	}
	if len(parse("")) != 0 {
		t.Fatal("an empty variable arms nothing")
	}
	Hit("not-armed") // returns
}
