package manifest_test

import (
	"fmt"
	"os"
	"path/filepath"

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
