package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/problem"
)

// member is a top-level member of a list answer other than items and page_info (a timeline's
// invocation_id, a schedule history's next_runs): small values, encoded before the items.
type member struct {
	name  string
	value any
}

// writePage writes a list answer (000's envelope: the extra members, items, page_info) with status
// 200, one item at a time: the answer is never built whole, and each item is dropped once it is
// written, so what a request holds shrinks as the client reads. The page itself is bounded by the
// store's byte budget (Config.MaxPageBytes); a client that stops reading holds it at most until
// the server's write timeout (WriteTimeout) ends the answer.
//
// The members are encoded before the status is sent, so that one that cannot be encoded is still a
// 500 problem. An item that cannot be encoded once the answer has started aborts the connection:
// the client sees a broken answer, never a short list that looks whole.
func writePage[V any](s *Server, w http.ResponseWriter, r *http.Request, items []V, info pageInfo, members ...member) {
	head := []byte{'{'}
	for _, m := range members {
		b, err := json.Marshal(m.value)
		if err != nil {
			s.problem(w, r, problem.Internal(fmt.Errorf("encoding the response: %w", err)))
			return
		}
		head = fmt.Appendf(head, "%q:%s,", m.name, b)
	}
	tail, err := json.Marshal(info)
	if err != nil {
		s.problem(w, r, problem.Internal(fmt.Errorf("encoding the response: %w", err)))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(append(head, `"items":[`...)); err != nil {
		return // the client is gone or the write timeout passed
	}
	var zero V
	enc := json.NewEncoder(w) // encodes each item in a pooled buffer and writes it from there
	for i := range items {
		if i > 0 {
			if _, err := w.Write([]byte{','}); err != nil {
				return
			}
		}
		err := enc.Encode(items[i])
		items[i] = zero
		var te *json.UnsupportedTypeError
		var ve *json.UnsupportedValueError
		var me *json.MarshalerError
		switch {
		case errors.As(err, &te) || errors.As(err, &ve) || errors.As(err, &me):
			obs.Logger(r.Context()).ErrorContext(r.Context(), "encoding a list item; answer aborted", "err", err)
			panic(http.ErrAbortHandler)
		case err != nil:
			return // the client is gone or the write timeout passed
		}
	}
	_, _ = w.Write(append(append([]byte(`],"page_info":`), tail...), "}\n"...))
}
