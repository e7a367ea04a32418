package server

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/larkrun/lark/internal/keyring"
)

// DevMasterKeyFile is the master key file `lark dev` keeps in its data directory.
const DevMasterKeyFile = "master.key"

// maxKeyFileBytes bounds a master key file (a few dozen keys at most).
const maxKeyFileBytes = 64 << 10

// LoadMasterKey builds the keyring of the master key setting (LARK_MASTER_KEY) or of the file
// that holds it (--master-key-file): one or more base64 32-byte keys separated by commas, the
// first sealing. Giving both is an error; giving neither returns nil (secrets disabled). Errors
// name the source, never a key.
func LoadMasterKey(setting, file string) (*keyring.Keyring, error) {
	switch {
	case setting != "" && file != "":
		return nil, errors.New("both LARK_MASTER_KEY and --master-key-file are set: use one")
	case file != "":
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("--master-key-file: %w", err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
		if err != nil {
			return nil, fmt.Errorf("--master-key-file: %w", err)
		}
		if len(b) > maxKeyFileBytes {
			return nil, fmt.Errorf("--master-key-file: larger than %d bytes", maxKeyFileBytes)
		}
		kr, err := keyring.Parse(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("--master-key-file %s: %w", file, err)
		}
		return kr, nil
	case setting != "":
		kr, err := keyring.Parse(setting)
		if err != nil {
			return nil, fmt.Errorf("LARK_MASTER_KEY: %w", err)
		}
		return kr, nil
	}
	return nil, nil
}

// LoadOrCreateDevMasterKey returns the path of dataDir's master.key, creating it (mode 0600, a new
// random key) when it is absent.
func LoadOrCreateDevMasterKey(dataDir string) (string, error) {
	path := filepath.Join(dataDir, DevMasterKeyFile)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	key, err := keyring.Generate()
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}
