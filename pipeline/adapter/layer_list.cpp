#include "strata/layer_list.h"

#include "core/errors.h"

namespace strata {

void LayerList::checkName(const std::string& name) const {
  STRATA_CHECK(!name.empty() && name.find('.') == std::string::npos, "LayerList: layer name \"", name,
               "\" must be non-empty and without '.' (groups make the dotted paths)");
  for (const Item& item : items_)
    STRATA_CHECK(item.name != name, "LayerList: two entries are named \"", name, "\"");
}

LayerList& LayerList::addFactory(std::string name, Factory factory) {
  checkName(name);
  items_.push_back({std::move(name), std::move(factory), nullptr});
  return *this;
}

LayerList& LayerList::add(std::string name, LayerList group) {
  checkName(name);
  STRATA_CHECK(!group.empty(), "LayerList: the group \"", name, "\" has no layers");
  items_.push_back({std::move(name), Factory(), std::make_shared<LayerList>(std::move(group))});
  return *this;
}

LayerList& LayerList::tie(std::string first, std::string second) {
  STRATA_CHECK(!first.empty() && !second.empty() && first != second, "LayerList::tie(\"", first, "\", \"", second,
               "\"): two different parameter paths");
  ties_.emplace_back(std::move(first), std::move(second));
  return *this;
}

void LayerList::flatten(const std::string& prefix, std::vector<Layer>& out) const {
  for (const Item& item : items_) {
    if (item.group)
      item.group->flatten(prefix + item.name + ".", out);
    else
      out.push_back({prefix + item.name, item.factory});
  }
}

std::vector<LayerList::Layer> LayerList::layers() const {
  std::vector<Layer> out;
  flatten("", out);
  return out;
}

void LayerList::flattenTies(const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) const {
  for (const auto& [a, b] : ties_) out.emplace_back(prefix + a, prefix + b);
  for (const Item& item : items_)
    if (item.group) item.group->flattenTies(prefix + item.name + ".", out);
}

std::vector<std::pair<std::string, std::string>> LayerList::ties() const {
  std::vector<std::pair<std::string, std::string>> out;
  flattenTies("", out);
  return out;
}

}  // namespace strata
