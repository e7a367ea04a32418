package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/larkrun/lark/internal/console"
)

// Wrap puts the console in front of the API handler: /console and below are the console's,
// everything else goes to the API.
func ExampleWrap() {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "api") })
	h, err := console.Wrap(api)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range []string{"/console/invocations", "/api/serverless-runtime/v1/whoami"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		fmt.Println(p, rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Cache-Control"))
	}
	// Output:
	// /console/invocations 200 text/html; charset=utf-8 no-cache
	// /api/serverless-runtime/v1/whoami 200 text/plain; charset=utf-8
}
