package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/larkrun/lark/pkg/larkclient"
)

// larkclientLimit1 asks for one item: the cheapest authenticated read.
var larkclientLimit1 = larkclient.ListOptions{Limit: 1}

// table writes aligned columns.
type table struct {
	w *tabwriter.Writer
}

func newTable(out io.Writer, header ...string) *table {
	t := &table{w: tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cols ...string) {
	for i, c := range cols {
		if i > 0 {
			fmt.Fprint(t.w, "\t")
		}
		fmt.Fprint(t.w, strings.NewReplacer("\t", " ", "\n", " ").Replace(c))
	}
	fmt.Fprintln(t.w)
}

func (t *table) flush() error { return t.w.Flush() }

// printJSON writes raw JSON indented, one document per call.
func printJSON(out io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return fmt.Errorf("printing the answer: %w", err)
	}
	buf.WriteByte('\n')
	_, err := out.Write(buf.Bytes())
	return err
}

// compact returns raw JSON on one line, cut to max runes.
func compact(raw json.RawMessage, max int) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	s := buf.String()
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

// ts formats a time for tables (UTC, seconds).
func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

func tsp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return ts(*t)
}

// shortID shortens an entrypoint GTS id to its last segment for tables.
func shortID(id string) string {
	s := strings.TrimSuffix(id, "~")
	if i := strings.LastIndexByte(s, '~'); i >= 0 {
		return s[i+1:]
	}
	return id
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// isTTY reports whether w is a terminal.
func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// bar draws a progress bar of width cells for done out of total.
func bar(done, total, width int) string {
	if total <= 0 {
		return "[" + strings.Repeat(" ", width) + "]"
	}
	n := done * width / total
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

// readData reads a --params/--data value: @file (or @- for stdin) or literal JSON; it must be
// valid JSON, at most 1 MiB.
func readData(v string, stdin io.Reader) (json.RawMessage, error) {
	const max = 1 << 20
	var b []byte
	if name, ok := strings.CutPrefix(v, "@"); ok {
		var r io.Reader
		if name == "-" {
			r = stdin
		} else {
			f, err := os.Open(name)
			if err != nil {
				return nil, usageErr("%v", err)
			}
			defer f.Close()
			r = f
		}
		var err error
		if b, err = io.ReadAll(io.LimitReader(r, max+1)); err != nil {
			return nil, usageErr("reading %s: %v", name, err)
		}
	} else {
		b = []byte(v)
	}
	if len(b) > max {
		return nil, usageErr("the JSON is larger than %d bytes", max)
	}
	if !json.Valid(b) {
		return nil, usageErr("not valid JSON: %s", compact(b, 60))
	}
	return json.RawMessage(bytes.TrimSpace(b)), nil
}
