module go.starlark.net

go 1.25.0

require (
	github.com/google/go-cmp v0.7.0
	golang.org/x/sys v0.42.0
)
