package manifest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/larkrun/lark/internal/manifest"
)

// A deploy folder with one function: its manifest leaves the source out, so it comes from the
// .star file of the same base name, and the Starlark implementation defaults are filled in.
func ExampleLoad() {
	dir, err := os.MkdirTemp("", "manifest-example-*")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	files := map[string]string{
		"hello.yaml":      "entrypoint_id: gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.demo.hello.v1~\ntitle: Hello\n",
		"hello.star":      "def main(ctx, input):\n    return {\"hello\": input.name}\n",
		"hello_test.star": "def test_hello(t):\n    pass\n",
		"nightly.yaml":    "kind: schedule\nschedule_id: nightly\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			fmt.Println(err)
			return
		}
	}
	set, err := manifest.Load(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	ep := set.Entrypoints[0]
	impl := ep.Body["implementation"].(map[string]any)
	fmt.Println(ep.ID())
	fmt.Println(impl["adapter"], impl["kind"])
	fmt.Printf("%q\n", impl["code"].(map[string]any)["source"])
	fmt.Println(len(set.Schedules), set.Schedules[0].ID())
	// Output:
	// gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.demo.hello.v1~
	// gts.x.core.serverless.adapter.starlark.v1~ code
	// "def main(ctx, input):\n    return {\"hello\": input.name}\n"
	// 1 nightly
}

// A deploy folder read for `lark deploy`: every problem is reported with its position, the
// resources come in deploy order, and a server's finding on the Starlark source is placed in the
// .star file it came from.
func ExampleLoadTree() {
	dir, err := os.MkdirTemp("", "manifest-example-*")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	files := map[string]string{
		"hello.yaml": "entrypoint_id: gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.demo.hello.v1~\n",
		"hello.star": "def main(ctx, input):\n    return {\"hello\": nme}\n",
		"bad.yaml":   "kind: trigger\nevent_type_id: x\nevent_type_id: y\n",
		"cron.yaml":  "kind: schedule\nname: nightly\nstart: 2026-01-01\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			fmt.Println(err)
			return
		}
	}
	rs, problems, err := manifest.LoadTree(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	problems.Sort()
	for _, p := range problems {
		fmt.Println(strings.TrimPrefix(p.String(), dir+string(filepath.Separator)))
	}
	for _, r := range rs {
		fmt.Println(r.Kind, r.Key())
		// Say the server's validation found an undefined name at line 2, column 23 of the source.
		p := r.Finding("$.implementation.code.source", 2, 23, "undefined name 'nme'")
		fmt.Println(strings.TrimPrefix(p.String(), dir+string(filepath.Separator)))
	}
	// Output:
	// bad.yaml:3:1: key "event_type_id" given twice
	// cron.yaml:3:8: unsupported value "2026-01-01" (tag !!timestamp): quote it to make it a string
	// entrypoint gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.demo.hello.v1~
	// hello.star:2:23: undefined name 'nme'
}
