#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <sys/times.h>
#include <unistd.h>
int main(int argc, char** argv) {
  std::string base = argv[1]; bool sync = argc > 2;
  mkdir(base.c_str(), 0755); mkdir((base + "/events").c_str(), 0755); mkdir((base + "/index").c_str(), 0755);
  char buf[256] = {1};
  tms t0; times(&t0); auto w0 = std::chrono::steady_clock::now();
  const int n = 500;
  for (int i = 0; i < n; ++i) {
    std::string d = base + "/events/" + std::to_string(1000000 + i);
    mkdir(d.c_str(), 0777);
    for (const std::string& f : {d + "/x.tfevents", base + "/index/" + std::to_string(i) + ".json"}) {
      std::string tmp = f + ".tmp";
      int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      write(fd, buf, 200);
      if (sync) fdatasync(fd);
      close(fd);
      rename(tmp.c_str(), f.c_str());
    }
  }
  tms t1; times(&t1);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  long hz = sysconf(_SC_CLK_TCK);
  printf("%s sync=%d: wall %.2f ms/step, sys %.2f ms/step, user %.2f ms/step\n", base.c_str(), sync, wall / n * 1e3,
         (t1.tms_stime - t0.tms_stime) * 1e3 / hz / n, (t1.tms_utime - t0.tms_utime) * 1e3 / hz / n);
}
