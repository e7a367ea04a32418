package keyring_test

import (
	"fmt"

	"github.com/larkrun/lark/internal/keyring"
)

func Example() {
	key, _ := keyring.Generate() // what `lark dev` writes into its data directory
	kr, err := keyring.Parse(key)
	if err != nil {
		panic(err)
	}
	aad := []byte("tenant-a/secrets/stripe_key/1")
	sealed, _ := kr.Seal([]byte("sk_test_123"), aad)
	plain, _ := kr.Open(sealed, aad)
	fmt.Println(string(plain))
	_, err = kr.Open(sealed, []byte("tenant-b/secrets/stripe_key/1"))
	fmt.Println(err)
	// Output:
	// sk_test_123
	// keyring: the sealed value is corrupt or does not belong here
}
