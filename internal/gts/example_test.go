package gts_test

import (
	"fmt"

	"github.com/larkrun/lark/internal/gts"
)

func ExampleParse() {
	id, err := gts.Parse("gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.billing.calculate_tax.v1.2~")
	if err != nil {
		panic(err)
	}
	fmt.Println(id.Last())
	fmt.Println(id.IsType(), id.MajorOnly())
	fmt.Println(id.Family())
	fmt.Println(id.MajorID())
	kind, err := gts.EntrypointKind(id)
	fmt.Println(kind, err)

	_, err = gts.Parse("gts.x.core.events.Type.v1~")
	fmt.Println(err)
	// Output:
	// vendor.app.billing.calculate_tax.v1.2
	// true false
	// gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.billing.calculate_tax
	// gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.billing.calculate_tax.v1~
	// function <nil>
	// gts: invalid id at offset 18: token must be lowercase
}

func ExamplePattern_Match() {
	const fn = gts.FunctionType + "vendor.app.billing."
	ids := []string{
		fn + "calculate_tax.v1~",
		fn + "calculate_tax.v1.7~",
		fn + "calculate_tax.v2~",
		fn + "calculate_vat.v1~",
	}
	for _, pattern := range []string{
		fn + "*",
		fn + "calculate_tax.v1.*",
		fn + "calculate_tax.v1~",
		fn + "calculate_tax.v1.7~",
	} {
		p, err := gts.ParsePattern(pattern)
		if err != nil {
			panic(err)
		}
		fmt.Print(pattern[len(fn):], ":")
		for _, id := range ids {
			if p.Match(id) {
				fmt.Print(" ", id[len(fn):])
			}
		}
		fmt.Println()
	}
	// Output:
	// *: calculate_tax.v1~ calculate_tax.v1.7~ calculate_tax.v2~ calculate_vat.v1~
	// calculate_tax.v1.*: calculate_tax.v1~ calculate_tax.v1.7~
	// calculate_tax.v1~: calculate_tax.v1~ calculate_tax.v1.7~
	// calculate_tax.v1.7~: calculate_tax.v1.7~
}

func ExamplePattern_Candidates() {
	p := gts.MustParsePattern(gts.FunctionType + "vendor.app.billing.calculate_tax.v1~")
	exact, prefixes := p.Candidates()
	fmt.Println(len(exact), len(prefixes), p.Exact())
	// Output:
	// 1 1 false
}
