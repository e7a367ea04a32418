// Command release-archive writes a reproducible .tar.gz for .ci/release: the same files give the
// same bytes on any machine (entries in argument order under one folder, owner 0:0 without names,
// modes 0755 or 0644 from the file's executable bit, every time the given one, and a gzip header
// without name or time).
//
//	go run ./.ci/release-archive -o OUT.tar.gz -dir FOLDER -mtime UNIX_SECONDS FILE...
package main

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

func main() {
	out := flag.String("o", "", "the archive to write")
	dir := flag.String("dir", "", "the folder the files are put in, inside the archive")
	mtime := flag.Int64("mtime", 0, "every entry's time, in seconds since 1970 (SOURCE_DATE_EPOCH)")
	flag.Parse()
	if *out == "" || *dir == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: release-archive -o OUT.tar.gz -dir FOLDER -mtime UNIX_SECONDS FILE...")
		os.Exit(2)
	}
	if err := write(*out, *dir, time.Unix(*mtime, 0).UTC(), flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "release-archive:", err)
		os.Exit(1)
	}
}

// write writes the archive to a temporary file beside out, then renames it into place.
func write(out, dir string, mtime time.Time, files []string) (err error) {
	f, err := os.CreateTemp(filepath.Dir(out), ".release-archive-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	gz, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(header(dir+"/", tar.TypeDir, 0o755, 0, mtime)); err != nil {
		return err
	}
	for _, name := range files {
		if err := add(tw, dir, name, mtime); err != nil {
			return err
		}
	}
	if err := errors.Join(tw.Close(), gz.Close(), f.Chmod(0o644), f.Close()); err != nil {
		return err
	}
	return os.Rename(f.Name(), out)
}

// add appends one regular file, as dir/<its base name>.
func add(tw *tar.Writer, dir, name string, mtime time.Time) error {
	src, err := os.Open(name)
	if err != nil {
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", name)
	}
	mode := int64(0o644)
	if fi.Mode().Perm()&0o100 != 0 {
		mode = 0o755
	}
	if err := tw.WriteHeader(header(dir+"/"+filepath.Base(name), tar.TypeReg, mode, fi.Size(), mtime)); err != nil {
		return err
	}
	_, err = io.Copy(tw, src)
	return err
}

// header is a tar header with nothing of the machine in it.
func header(name string, typ byte, mode, size int64, mtime time.Time) *tar.Header {
	return &tar.Header{Name: name, Typeflag: typ, Mode: mode, Size: size, ModTime: mtime, Format: tar.FormatPAX}
}
