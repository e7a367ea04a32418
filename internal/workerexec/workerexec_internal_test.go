package workerexec

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/workerclient"
	"github.com/larkrun/lark/internal/workerproto"
)

// TestErrorConstants: the error types and categories workerproto names for the worker client
// (which must not import the interpreter) are the sandbox's.
func TestErrorConstants(t *testing.T) {
	t.Parallel()
	require.Equal(t, sandbox.ErrRuntime, workerproto.ErrRuntime)
	require.Equal(t, sandbox.ErrTimeout, workerproto.ErrTimeout)
	require.Equal(t, sandbox.CategoryRetryable, workerproto.CategoryRetryable)
	require.Equal(t, sandbox.CategoryNonRetryable, workerproto.CategoryNonRetryable)
	require.Equal(t, sandbox.CategoryTimeout, workerproto.CategoryTimeout)
}

// fakeSession answers secret requests with a fixed reply or error.
type fakeSession struct {
	reply workerproto.SecretReply
	err   error
}

func (s fakeSession) Secret(context.Context, string) (workerproto.SecretReply, error) {
	return s.reply, s.err
}

// TestSecretResolver: a secret the server gives is used for its hosts; one it does not know (404)
// is unknown to the task; a task without a secret path, or a server that cannot be asked, leaves
// secrets unavailable (the request fails as it would on a server without a master key).
func TestSecretResolver(t *testing.T) {
	t.Parallel()
	resolve := func(s workerclient.Session) (egress.Secret, error) {
		return secretResolver{&host{session: s}}.ResolveSecret(context.Background(), "api_key")
	}
	got, err := resolve(fakeSession{reply: workerproto.SecretReply{Value: "v", AllowedHosts: []string{"api.example.com"}}})
	require.NoError(t, err)
	require.Equal(t, egress.Secret{Value: "v", AllowedHosts: []string{"api.example.com"}}, got)
	_, err = resolve(fakeSession{err: &workerclient.StatusError{Status: http.StatusNotFound}})
	require.ErrorIs(t, err, egress.ErrUnknownSecret)
	_, err = resolve(fakeSession{err: workerclient.ErrNoSecretPath})
	require.ErrorIs(t, err, egress.ErrSecretsUnavailable)
	_, err = resolve(fakeSession{err: errors.New("connection refused")})
	require.ErrorIs(t, err, egress.ErrSecretsUnavailable)
}
