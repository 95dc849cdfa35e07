// Unit tests are fast, but a few run the real `lemni` bin or scrypt: on a loaded two-core machine 5 s
// (Jest's default) is not enough for those, and a timeout there says nothing about the code.
jest.setTimeout(30_000);
