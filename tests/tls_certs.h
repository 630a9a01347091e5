// Test certificates made on the spot with the `openssl` command: a CA, and one
// certificate signed by it for 127.0.0.1 and localhost (subjectAltName) that
// serves as both server and client certificate - the layout of --tls-dir
// (ca.pem, cert.pem, key.pem). Nothing is checked in: each test makes its own.
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>

namespace testbed::testing {

inline bool HaveOpenssl() { return std::system("command -v openssl >/dev/null 2>&1") == 0; }

// Writes DIR/ca.pem, DIR/cert.pem and DIR/key.pem (and the CA's key and the
// openssl log beside them); `name` goes into the subjects. Returns "" or what
// went wrong.
inline std::string MakeTlsDir(const std::string& dir, const std::string& name) {
  std::ofstream(dir + "/ext.cnf") << "basicConstraints = CA:FALSE\n"
                                     "keyUsage = critical, digitalSignature, keyEncipherment\n"
                                     "extendedKeyUsage = serverAuth, clientAuth\n"
                                     "subjectAltName = DNS:localhost, IP:127.0.0.1\n";
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string script =
      "cd '" + dir + "' && { " +
      "openssl req -x509 " + key + " -keyout ca.key -out ca.pem -days 2 -subj '/CN=" + name +
      " test CA' -addext basicConstraints=critical,CA:TRUE "
      "-addext keyUsage=critical,keyCertSign,cRLSign && " +
      "openssl req " + key + " -keyout key.pem -out cert.csr -subj '/CN=" + name +
      " localhost' && " +
      "openssl x509 -req -in cert.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
      "-extfile ext.cnf -out cert.pem; } >openssl.log 2>&1";
  if (std::system(script.c_str()) != 0) {
    std::ifstream log(dir + "/openssl.log");
    return "openssl failed in " + dir + ": " +
           std::string(std::istreambuf_iterator<char>(log), std::istreambuf_iterator<char>());
  }
  return "";
}

}  // namespace testbed::testing
