package pgstore

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"sync"

	"github.com/larkrun/lark/internal/store/sqlcore"
)

// rebound is a querier that takes sqlstore-style ? and ?N placeholders (the domain files' and the
// OData compiler's) and hands PostgreSQL $N ones. pgx prepares and caches each distinct statement
// per connection, so the rewrite is the only per-text cost, and it is cached too.
type rebound struct{ q sqlcore.Querier }

func (r rebound) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return r.q.ExecContext(ctx, rebind(query), args...)
}

func (r rebound) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return r.q.QueryContext(ctx, rebind(query), args...)
}

func (r rebound) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return r.q.QueryRowContext(ctx, rebind(query), args...)
}

// rebindCache maps query texts to their rewrites. Texts are a small set (filters differ in
// structure, not in values, which are bound); past maxRebinds, rewrites are not kept.
var rebindCache struct {
	sync.RWMutex
	m map[string]string
}

const maxRebinds = 4096

// rebind rewrites ? (the next parameter) and ?N (parameter N) to $N, outside quoted strings and
// identifiers.
func rebind(q string) string {
	rebindCache.RLock()
	out, ok := rebindCache.m[q]
	rebindCache.RUnlock()
	if ok {
		return out
	}
	out = rewrite(q)
	rebindCache.Lock()
	if rebindCache.m == nil {
		rebindCache.m = map[string]string{}
	}
	if len(rebindCache.m) < maxRebinds {
		rebindCache.m[q] = out
	}
	rebindCache.Unlock()
	return out
}

func rewrite(q string) string {
	if !strings.ContainsRune(q, '?') {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(q); i++ {
		c := q[i]
		if quote != 0 {
			b.WriteByte(c)
			if c == quote {
				quote = 0
			}
			continue
		}
		switch c {
		case '\'', '"':
			quote = c
			b.WriteByte(c)
		case '?':
			j := i + 1
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
				j++
			}
			if j > i+1 {
				b.WriteByte('$')
				b.WriteString(q[i+1 : j])
				i = j - 1
				continue
			}
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
